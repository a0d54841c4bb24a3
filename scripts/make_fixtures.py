#!/usr/bin/env python3
"""Generates the TorchScript fixtures under tests/fixtures (scripts/python
scripts/make_fixtures.py: the torch 2.11 and torchvision 0.26 of scripts/install-deps.sh).
The files are committed; rerun this only to change them. Each model is small (under 0.5 MB;
the whole folder, data included, about 4 MB) and seeded.

Most were saved by torch 1.13 (Debian's python3-torch and python3-torchvision 0.14) and are
kept as they are: 2.11 loads them and computes what 1.13 did (tests/unit/fixtures_test.cpp).
Those that torch 2.11 scripts into another graph were saved again by 2.11: unet.pt,
lstm_dropout.pt (torch.nn.functional and nn.LSTM's code changed), real/lstm_gru.pt,
real/shufflenet_v2.pt, real/swin.pt, real/transformer.pt and real/transformer_encoder.pt
(nn.MultiheadAttention now calls scaled_dot_product_attention), data/small_resnet.pt.

  hf_gpt2.pt        scripted GPT-2 written the way Hugging Face writes it: Conv1D, _attn and
                    _split_heads helpers, registered causal-mask buffer, dropout modules,
                    nn.ModuleList `h` inside a `transformer` wrapper, LM head tied to wte,
                    an Optional attention_mask argument, tuple output
  traced_gpt.pt     a small GPT traced with torch.jit.trace: sizes become prim::NumToTensor
                    chains, nn.Sequential MLPs, head output reshaped with B * T
  unet.pt           scripted 1-D U-Net: skips from the encoder to the decoder that span
                    several blocks (long residuals), one by addition, one by torch.cat
  data_dependent.pt an int computed from tensor data in one module and used after the next
                    one: cannot cross a cut between them (an error case)
  two_inputs.pt     forward(x, y): without a data file, an input ppstage does not feed
  squeeze_batch.pt  fails only on a micro-batch of one sample (squeeze(0) drops the batch
                    dimension inside a submodule): an error that appears during training
  lstm_dropout.pt   nn.LSTM(num_layers=2, dropout=0.5): dropout ATen draws inside the op,
                    which ppstage cannot key (an error case)

  real/*.pt         real architectures from torchvision and torch.nn,
                    widths scaled down, in training mode (see REAL_MODELS below): BatchNorm,
                    dropout, stochastic depth, dense skips, depthwise convolutions,
                    squeeze-excitation, channel shuffle, window attention,
                    nn.MultiheadAttention, nn.TransformerEncoder, nn.Transformer, LSTM + GRU

  hf_gpt2_loss.pt   hf_gpt2 taking labels and returning its loss in a dict (--train.loss model)

  data/             data files in every format ppstage reads (data/data_files.h), written
                    with `scripts/python scripts/make_fixtures.py data` (which writes only
                    them): a small ResNet-style classifier and its images and labels as .npy,
                    torch.save and IDX files, token files with and without llm.c's header,
                    and two inputs (input_ids, attention_mask) with labels for hf_gpt2.pt;
                    `make_fixtures.py masked_bert` writes only masked_bert.pt (a BERT on
                    nn.TransformerEncoder called with a padding mask) and its tokens

  references_1.13.0.pt  per model, an example input and torch 1.13's output (eval mode):
                    `/usr/bin/python3 scripts/make_fixtures.py references` with Debian's
                    python3-torch 1.13, which writes only it

fixtures.json records each model's example input for the tests.
"""
import json
import math
import os
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures")


# --- Hugging Face style GPT-2 (scripted) -------------------------------------------------

class GPT2Config:
    vocab_size = 96
    n_positions = 16
    n_embd = 32
    n_layer = 3
    n_head = 4
    resid_pdrop = 0.0
    embd_pdrop = 0.0
    attn_pdrop = 0.0
    layer_norm_epsilon = 1e-5


class Conv1D(nn.Module):
    """Linear layer with transposed weight, as in transformers.pytorch_utils.Conv1D."""

    def __init__(self, nf: int, nx: int):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        size_out = x.size()[:-1] + [self.nf]
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        x = x.view(size_out)
        return x


class NewGELUActivation(nn.Module):
    def forward(self, input):
        return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) *
                                               (input + 0.044715 * torch.pow(input, 3.0))))


class GPT2Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        max_positions = config.n_positions
        self.register_buffer(
            "bias",
            torch.tril(torch.ones((max_positions, max_positions), dtype=torch.bool)).view(
                1, 1, max_positions, max_positions),
            persistent=False,
        )
        self.register_buffer("masked_bias", torch.tensor(-1e4), persistent=False)
        self.embed_dim = config.n_embd
        self.num_heads = config.n_head
        self.head_dim = self.embed_dim // self.num_heads
        self.split_size = self.embed_dim
        self.scale_attn_weights = True
        self.c_attn = Conv1D(3 * self.embed_dim, self.embed_dim)
        self.c_proj = Conv1D(self.embed_dim, self.embed_dim)
        self.attn_dropout = nn.Dropout(config.attn_pdrop)
        self.resid_dropout = nn.Dropout(config.resid_pdrop)

    def _attn(self, query, key, value, attention_mask: Optional[torch.Tensor] = None):
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        if self.scale_attn_weights:
            attn_weights = attn_weights / torch.full(
                [], value.size(-1) ** 0.5, dtype=attn_weights.dtype, device=attn_weights.device)
        query_length, key_length = query.size(-2), key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length: key_length, :key_length]
        mask_value = torch.full([], -1e9, dtype=attn_weights.dtype, device=attn_weights.device)
        attn_weights = torch.where(causal_mask, attn_weights, mask_value)
        if attention_mask is not None:
            attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_weights = self.attn_dropout(attn_weights)
        attn_output = torch.matmul(attn_weights, value)
        return attn_output, attn_weights

    def _split_heads(self, tensor, num_heads: int, attn_head_size: int):
        new_shape = tensor.size()[:-1] + [num_heads, attn_head_size]
        tensor = tensor.view(new_shape)
        return tensor.permute(0, 2, 1, 3)  # (batch, head, seq_length, head_features)

    def _merge_heads(self, tensor, num_heads: int, attn_head_size: int):
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        new_shape = tensor.size()[:-2] + [num_heads * attn_head_size]
        return tensor.view(new_shape)

    def forward(self, hidden_states, attention_mask: Optional[torch.Tensor] = None):
        query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2)
        query = self._split_heads(query, self.num_heads, self.head_dim)
        key = self._split_heads(key, self.num_heads, self.head_dim)
        value = self._split_heads(value, self.num_heads, self.head_dim)
        attn_output, attn_weights = self._attn(query, key, value, attention_mask)
        attn_output = self._merge_heads(attn_output, self.num_heads, self.head_dim)
        attn_output = self.c_proj(attn_output)
        attn_output = self.resid_dropout(attn_output)
        return attn_output


class GPT2MLP(nn.Module):
    def __init__(self, intermediate_size, config):
        super().__init__()
        embed_dim = config.n_embd
        self.c_fc = Conv1D(intermediate_size, embed_dim)
        self.c_proj = Conv1D(embed_dim, intermediate_size)
        self.act = NewGELUActivation()
        self.dropout = nn.Dropout(config.resid_pdrop)

    def forward(self, hidden_states):
        hidden_states = self.c_fc(hidden_states)
        hidden_states = self.act(hidden_states)
        hidden_states = self.c_proj(hidden_states)
        hidden_states = self.dropout(hidden_states)
        return hidden_states


class GPT2Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        hidden_size = config.n_embd
        self.ln_1 = nn.LayerNorm(hidden_size, eps=config.layer_norm_epsilon)
        self.attn = GPT2Attention(config)
        self.ln_2 = nn.LayerNorm(hidden_size, eps=config.layer_norm_epsilon)
        self.mlp = GPT2MLP(4 * hidden_size, config)

    def forward(self, hidden_states, attention_mask: Optional[torch.Tensor] = None):
        residual = hidden_states
        hidden_states = self.ln_1(hidden_states)
        attn_output = self.attn(hidden_states, attention_mask=attention_mask)
        hidden_states = attn_output + residual
        residual = hidden_states
        hidden_states = self.ln_2(hidden_states)
        feed_forward_hidden_states = self.mlp(hidden_states)
        hidden_states = residual + feed_forward_hidden_states
        return hidden_states


class GPT2Model(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embed_dim = config.n_embd
        self.wte = nn.Embedding(config.vocab_size, self.embed_dim)
        self.wpe = nn.Embedding(config.n_positions, self.embed_dim)
        self.drop = nn.Dropout(config.embd_pdrop)
        self.h = nn.ModuleList([GPT2Block(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(self.embed_dim, eps=config.layer_norm_epsilon)

    def forward(self, input_ids, attention_mask: Optional[torch.Tensor] = None):
        input_shape = input_ids.size()
        input_ids = input_ids.view(-1, input_shape[-1])
        batch_size = input_ids.shape[0]
        device = input_ids.device
        position_ids = torch.arange(0, input_shape[-1], dtype=torch.long, device=device)
        position_ids = position_ids.unsqueeze(0).view(-1, input_shape[-1])
        if attention_mask is not None:
            attention_mask = attention_mask.view(batch_size, -1)
            attention_mask = attention_mask[:, None, None, :]
            attention_mask = (1.0 - attention_mask) * -10000.0
        inputs_embeds = self.wte(input_ids)
        position_embeds = self.wpe(position_ids)
        hidden_states = inputs_embeds + position_embeds
        hidden_states = self.drop(hidden_states)
        output_shape = input_shape + [hidden_states.size(-1)]
        for block in self.h:
            hidden_states = block(hidden_states, attention_mask)
        hidden_states = self.ln_f(hidden_states)
        hidden_states = hidden_states.view(output_shape)
        return hidden_states


class GPT2LMHeadModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.transformer = GPT2Model(config)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tie_weights()

    def forward(self, input_ids,
                attention_mask: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        hidden_states = self.transformer(input_ids, attention_mask)
        lm_logits = self.lm_head(hidden_states)
        return (lm_logits, hidden_states)


class GPT2WithLoss(nn.Module):
    """Hugging Face style: `labels` in, the loss out (--train.loss model), in a dict whose
    loss is not its first entry."""

    def __init__(self, config):
        super().__init__()
        self.model = GPT2LMHeadModel(config)

    def forward(self, input_ids, attention_mask: Optional[torch.Tensor] = None,
                labels: Optional[torch.Tensor] = None) -> Dict[str, torch.Tensor]:
        logits, _ = self.model(input_ids, attention_mask)
        if labels is None:
            return {"logits": logits}
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1),
                               ignore_index=-100)
        return {"logits": logits, "loss": loss}


def write_loss_model():
    torch.manual_seed(0)
    torch.jit.save(torch.jit.script(GPT2WithLoss(GPT2Config())), os.path.join(OUT, "hf_gpt2_loss.pt"))


# --- a traced GPT -------------------------------------------------------------------------

class TracedBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.norm2 = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.heads)
        mask = torch.ones(T, T, device=x.device).tril() == 0
        att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.ff(self.norm2(x))


class TracedGPT(nn.Module):
    def __init__(self, vocab=64, d=32, heads=4, layers=3):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([TracedBlock(d, heads) for _ in range(layers)])
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        B, T = idx.shape
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)).view(B * T, -1)


# --- a 1-D U-Net with long skips ----------------------------------------------------------

class ConvBlock(nn.Module):
    def __init__(self, c_in, c_out, stride: int = 1):
        super().__init__()
        self.conv = nn.Conv1d(c_in, c_out, kernel_size=4 if stride == 2 else 3,
                              stride=stride, padding=1)
        self.norm = nn.GroupNorm(4, c_out)

    def forward(self, x):
        return F.silu(self.norm(self.conv(x)))


class UpBlock(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.up = nn.ConvTranspose1d(c_in, c_out, kernel_size=4, stride=2, padding=1)
        self.norm = nn.GroupNorm(4, c_out)

    def forward(self, x):
        return F.silu(self.norm(self.up(x)))


class UNet1d(nn.Module):
    def __init__(self, channels=4, width=16):
        super().__init__()
        self.stem = ConvBlock(channels, width)
        self.down1 = ConvBlock(width, 2 * width, stride=2)
        self.down2 = ConvBlock(2 * width, 4 * width, stride=2)
        self.mid = ConvBlock(4 * width, 4 * width)
        self.up2 = UpBlock(4 * width, 2 * width)
        self.up1 = UpBlock(2 * width, width)
        self.fuse = ConvBlock(2 * width, width)
        self.head = nn.Conv1d(width, channels, kernel_size=1)

    def forward(self, x):
        # x: (B, channels, L) with L divisible by 4
        s0 = self.stem(x)          # (B, w, L)      -> skip to the last decoder block
        s1 = self.down1(s0)        # (B, 2w, L/2)   -> skip to up2
        h = self.down2(s1)         # (B, 4w, L/4)
        h = self.mid(h)
        h = self.up2(h) + s1       # long residual by addition
        h = self.up1(h)            # (B, w, L)
        h = self.fuse(torch.cat([h, s0], dim=1))  # long residual by concatenation
        return self.head(h) + x


# --- error cases --------------------------------------------------------------------------

class DataDependent(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(8, 8)
        self.second = nn.Linear(8, 8)

    def forward(self, x):
        h = self.first(x)
        repeats = int(h.abs().sum()) % 3 + 1   # an int that depends on tensor data
        return self.second(h).repeat(1, repeats)


class TwoInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x, y):
        return self.linear(x) + y


class Mixer(nn.Module):
    def forward(self, h):
        # h: (B, 4, 8); squeeze(0) also drops a batch dimension of size 1
        return h.squeeze(0).transpose(1, 2).transpose(1, 2)


class SqueezeBatch(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.mixer = Mixer()
        self.b = nn.Linear(8, 8)

    def forward(self, x):
        return self.b(self.mixer(self.a(x)))


class LstmDropout(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(16, 8)
        self.lstm = nn.LSTM(8, 8, num_layers=2, dropout=0.5, batch_first=True)
        self.head = nn.Linear(8, 16)

    def forward(self, idx):
        x, _ = self.lstm(self.embed(idx))
        return self.head(x)


# --- real architectures (torchvision 0.14, torch.nn), scaled down --------------------------

class TokenTransformerEncoder(nn.Module):
    """nn.TransformerEncoder over an embedding: a token language model."""

    def __init__(self, vocab=64, d=32, heads=4, layers=2, seq=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(1, seq, d))
        layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=64, dropout=0.1,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.embed(idx) + self.pos[:, :idx.size(1)]
        return self.head(self.encoder(x))


class TokenTransformer(nn.Module):
    """nn.Transformer (encoder-decoder): the tokens are the source, the tokens shifted by one
    the target; the encoder's memory crosses into the decoder's stages."""

    def __init__(self, vocab=64, d=32, heads=4, seq=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.transformer = nn.Transformer(d, heads, num_encoder_layers=2, num_decoder_layers=2,
                                          dim_feedforward=64, dropout=0.1, batch_first=True)
        self.register_buffer("causal", torch.triu(torch.full((seq, seq), float("-inf")), 1))
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        src = self.embed(idx)
        tgt = self.embed(torch.roll(idx, 1, 1))
        T = idx.size(1)
        return self.head(self.transformer(src, tgt, tgt_mask=self.causal[:T, :T]))


class Recurrent(nn.Module):
    """Embedding -> LSTM (2 layers) -> GRU -> linear."""

    def __init__(self, vocab=64, d=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, d, num_layers=2, batch_first=True)
        self.gru = nn.GRU(d, d, batch_first=True)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        x, _ = self.lstm(self.embed(idx))
        x, _ = self.gru(x)
        return self.head(x)


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    h = x.size(-1) // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


class LlamaAttention(nn.Module):
    """Llama's attention: one fused q/k/v projection split into heads, rotary embeddings."""
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d, bias=False)

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split([d, d, d], dim=-1)
        q = q.view(b, t, self.heads, self.hd).transpose(1, 2)
        k = k.view(b, t, self.heads, self.hd).transpose(1, 2)
        v = v.view(b, t, self.heads, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        att = (q @ k.transpose(-2, -1)) / (self.hd ** 0.5)
        future = torch.ones(t, t, device=x.device).triu(1) > 0.5
        att = att.masked_fill(future, float("-inf")).softmax(-1)
        return self.o((att @ v).transpose(1, 2).reshape(b, t, d))


class LlamaBlock(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.attn_norm = RMSNorm(d)
        self.attn = LlamaAttention(d, heads)
        self.mlp_norm = RMSNorm(d)
        self.gate = nn.Linear(d, 2 * d, bias=False)
        self.up = nn.Linear(d, 2 * d, bias=False)
        self.down = nn.Linear(2 * d, d, bias=False)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))  # SwiGLU


class Llama(nn.Module):
    """A Llama-style decoder as a new user would write it: RMSNorm, SwiGLU, RoPE."""
    def __init__(self, vocab=64, d=32, heads=4, layers=2, seq=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList([LlamaBlock(d, heads) for _ in range(layers)])
        self.norm = RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        hd = d // heads
        inverse = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
        angles = torch.outer(torch.arange(seq).float(), inverse)
        angles = torch.cat([angles, angles], -1)
        self.register_buffer("cos", angles.cos())
        self.register_buffer("sin", angles.sin())

    def forward(self, idx):
        t = idx.size(1)
        cos, sin = self.cos[:t], self.sin[:t]
        x = self.embed(idx)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.head(self.norm(x))


def real_models():
    """(file name, module, example input shape or None for int64 tokens, what it covers)."""
    from torchvision.models import (convnext, densenet, efficientnet, mobilenetv2, regnet,
                                    shufflenetv2, swin_transformer, vision_transformer)
    image = [4, 3, 32, 32]
    small_image = [4, 3, 16, 16]
    yield ("mobilenet_v2.pt", mobilenetv2.MobileNetV2(
        num_classes=10, width_mult=0.25, dropout=0.2,
        inverted_residual_setting=[[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 2, 2]]),
        image, "BatchNorm, depthwise convolutions, dropout")
    mb = efficientnet.MBConvConfig
    yield ("efficientnet.pt", efficientnet.EfficientNet(
        [mb(1, 3, 1, 16, 16, 1, 0.5, 0.5), mb(4, 3, 2, 16, 24, 2, 0.5, 0.5),
         mb(4, 5, 2, 24, 40, 2, 0.5, 0.5)],
        dropout=0.2, stochastic_depth_prob=0.2, num_classes=10, last_channel=64),
        image, "squeeze-excitation, stochastic depth, dropout")
    yield ("shufflenet_v2.pt", shufflenetv2.ShuffleNetV2([2, 2, 2], [8, 16, 32, 64, 128],
                                                         num_classes=10),
           image, "channel shuffle")
    yield ("densenet.pt", densenet.DenseNet(growth_rate=8, block_config=(2, 2, 2),
                                            num_init_features=16, bn_size=2, drop_rate=0.1,
                                            num_classes=10),
           image, "concatenating (dense) skips, dropout")
    yield ("swin.pt", swin_transformer.SwinTransformer(
        patch_size=[2, 2], embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=[4, 4],
        mlp_ratio=2.0, dropout=0.1, attention_dropout=0.1, stochastic_depth_prob=0.1,
        num_classes=10), small_image, "window attention, stochastic depth")
    yield ("vit.pt", vision_transformer.VisionTransformer(
        image_size=16, patch_size=4, num_layers=3, num_heads=2, hidden_dim=32, mlp_dim=64,
        dropout=0.1, attention_dropout=0.1, num_classes=10),
        small_image, "nn.MultiheadAttention, dropout")
    cn = convnext.CNBlockConfig
    yield ("convnext.pt", convnext.ConvNeXt([cn(16, 32, 2), cn(32, None, 2)],
                                            stochastic_depth_prob=0.2, num_classes=10),
           image, "depthwise convolutions, layer scale, stochastic depth")
    yield ("regnet_y.pt", regnet.RegNet(regnet.BlockParams.from_init_params(
        depth=4, w_0=8, w_a=8.0, w_m=2.0, group_width=8, se_ratio=0.25),
        num_classes=10, stem_width=8), image, "BatchNorm, grouped convolutions, squeeze-excitation")
    yield ("transformer_encoder.pt", TokenTransformerEncoder(), None,
           "nn.TransformerEncoder (fast-path checks), dropout")
    yield ("transformer.pt", TokenTransformer(), None,
           "nn.Transformer encoder-decoder, the memory crossing stages")
    yield ("lstm_gru.pt", Recurrent(), None, "nn.LSTM (2 layers) and nn.GRU")
    yield ("llama.pt", Llama(), None, "Llama-style: RMSNorm, SwiGLU, fused qkv, rotary embeddings")


def write_real_models():
    """tests/fixtures/real/*.pt and real/fixtures.json (input and what each covers)."""
    out = os.path.join(OUT, "real")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    listing = {}
    for name, module, shape, covers in real_models():
        module.train()
        torch.jit.save(torch.jit.script(module), os.path.join(out, name))
        entry = {"covers": covers, "params": sum(p.numel() for p in module.parameters())}
        if shape is None:
            entry.update({"dtype": "int64", "shape": [4, 16], "vocab_size": 64})
        else:
            entry.update({"dtype": "float32", "shape": shape})
        listing[name] = entry
    with open(os.path.join(out, "fixtures.json"), "w") as f:
        json.dump(listing, f, indent=2, sort_keys=True)
        f.write("\n")
    print("wrote", ", ".join(sorted(listing)), "to", os.path.normpath(out))


class ResidualBlock(nn.Module):
    """conv-norm-relu-conv-norm plus the input (projected when the shape changes)."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.norm1 = nn.GroupNorm(4, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.norm2 = nn.GroupNorm(4, cout)
        self.shortcut = nn.Identity() if stride == 1 and cin == cout else nn.Conv2d(cin, cout, 1, stride)

    def forward(self, x):
        h = F.relu(self.norm1(self.conv1(x)))
        return F.relu(self.norm2(self.conv2(h)) + self.shortcut(x))


class SmallResNet(nn.Module):
    """A ResNet-style classifier of (N, 1, H, W) images into 10 classes. GroupNorm, not
    BatchNorm: a pipelined run then matches one process at any micro-batch size."""

    def __init__(self, width: int = 16, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, width, 3, 1, 1, bias=False), nn.GroupNorm(4, width), nn.ReLU())
        self.blocks = nn.Sequential(
            ResidualBlock(width, width, 1), ResidualBlock(width, 2 * width, 2),
            ResidualBlock(2 * width, 2 * width, 1), ResidualBlock(2 * width, 4 * width, 2))
        self.head = nn.Linear(4 * width, classes)

    def forward(self, images):
        h = self.blocks(self.stem(images))
        return self.head(h.mean(dim=(2, 3)))


def write_idx(path: str, values, gzipped: bool):
    import gzip
    import struct
    header = struct.pack(">BBBB", 0, 0, 0x08, values.dim()) + b"".join(
        struct.pack(">I", d) for d in values.shape)
    data = header + values.to(torch.uint8).numpy().tobytes()
    with (gzip.open(path, "wb") if gzipped else open(path, "wb")) as f:
        f.write(data)


def write_data_fixtures():
    """tests/fixtures/data: 64 images of 8x8 in 10 classes (the class is where a bright
    square sits, so the classifier can learn it), in every format; token files."""
    import numpy as np
    out = os.path.join(OUT, "data")
    os.makedirs(os.path.join(out, "classes_npy"), exist_ok=True)
    torch.manual_seed(0)
    torch.jit.save(torch.jit.script(SmallResNet()), os.path.join(out, "small_resnet.pt"))
    n = 64
    labels = torch.randint(0, 10, (n,))
    pixels = torch.randint(0, 60, (n, 8, 8))
    for i in range(n):
        r, c = divmod(int(labels[i]), 4)
        pixels[i, 2 * r:2 * r + 3, 2 * c:2 * c + 2] += 180
    images = pixels.float().div(255).unsqueeze(1)  # (N, 1, 8, 8) as ppstage reads IDX
    ignored = labels.clone()
    ignored[::7] = -100  # --train.ignore_index's default: these do not count
    np.save(os.path.join(out, "classes_npy", "images.npy"), images.numpy())
    np.save(os.path.join(out, "classes_npy", "labels.npy"), ignored.numpy())
    np.save(os.path.join(out, "onehot.npy"), F.one_hot(labels, 10).float().numpy())  # mse targets
    torch.save({"images": images, "labels": labels}, os.path.join(out, "classes.pt"))
    write_idx(os.path.join(out, "tiny-images-idx3-ubyte.gz"), pixels, gzipped=True)
    write_idx(os.path.join(out, "tiny-labels-idx1-ubyte.gz"), labels, gzipped=True)
    # Tokens: bytes of this script (ids below 256), uint16, bare and after llm.c's header.
    with open(os.path.abspath(__file__), "rb") as f:
        tokens = np.frombuffer(f.read()[:6000], dtype=np.uint8).astype(np.uint16)
    tokens.tofile(os.path.join(out, "tokens_u16.bin"))
    header = np.zeros(256, dtype=np.int32)
    header[:3] = (20240520, 1, len(tokens))
    with open(os.path.join(out, "tokens_header.bin"), "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.tobytes())
    write_masked_tokens(out, tokens)
    write_bad_data(os.path.join(out, "bad"), images, labels)
    print("wrote the data fixtures to", os.path.normpath(out))


def write_masked_tokens(out: str, tokens):
    """Two inputs for hf_gpt2.pt (vocabulary 96): 64 windows of 16 ids of various lengths,
    padded with 0; attention_mask 1 on the real ids; labels the next id, -100 on padding
    and at the end. As a torch.save dict (names match forward's arguments) and as an .npy
    folder under other names (tokens, mask, labels: fed with --model.inputs)."""
    import numpy as np
    n, t = 64, 16
    ids = torch.from_numpy(tokens.astype(np.int64) % 96)
    gen = torch.Generator().manual_seed(1)
    input_ids = torch.zeros(n, t, dtype=torch.long)
    mask = torch.zeros(n, t, dtype=torch.long)
    labels = torch.full((n, t), -100, dtype=torch.long)
    for i in range(n):
        length = int(torch.randint(6, t + 1, (1,), generator=gen))
        window = ids[i * 40:i * 40 + length + 1]
        input_ids[i, :length] = window[:length]
        mask[i, :length] = 1
        labels[i, :length] = window[1:length + 1]
    torch.save({"input_ids": input_ids, "attention_mask": mask, "labels": labels},
               os.path.join(out, "masked_tokens.pt"))
    os.makedirs(os.path.join(out, "masked_npy"), exist_ok=True)
    for name, values in (("tokens", input_ids), ("mask", mask), ("labels", labels)):
        np.save(os.path.join(out, "masked_npy", name + ".npy"), values.numpy())


def write_bad_data(out: str, images, labels):
    """tests/fixtures/data/bad: data files ppstage must refuse before step 1."""
    import numpy as np
    os.makedirs(os.path.join(out, "out_of_range"), exist_ok=True)
    np.save(os.path.join(out, "fortran.npy"), np.asfortranarray(images.numpy()[:, 0]))
    np.save(os.path.join(out, "big_endian.npy"), images.numpy().astype(">f4"))
    np.save(os.path.join(out, "complex.npy"), images.numpy()[:, 0].astype(np.complex64))
    torch.save({"images": images, "labels": labels[:10]}, os.path.join(out, "differ.pt"))
    np.save(os.path.join(out, "out_of_range", "images.npy"), images.numpy())
    np.save(os.path.join(out, "out_of_range", "labels.npy"), (labels + 5).numpy())  # up to 14


def write_references():
    """references_<torch version>.pt: for every model fixture above that this torch loads, an
    example input and the output of its forward in eval mode, computed by the torch that runs
    this. The one committed was made by Debian's 1.13, which saved most fixtures; the test
    LoadedFixtures checks that the LibTorch ppstage links loads each one and computes the
    same."""
    entries = {}
    for folder in (OUT, os.path.join(OUT, "real")):
        with open(os.path.join(folder, "fixtures.json")) as f:
            specs = json.load(f)
        for name, spec in sorted(specs.items()):
            path = os.path.join(folder, name)
            try:
                model = torch.jit.load(path).eval()
            except Exception:  # saved by a newer torch than this one
                print(f"{name}: no reference (torch {torch.__version__} cannot load it)")
                continue
            gen = torch.Generator().manual_seed(0)
            shape = [2] + spec["shape"][1:]  # a batch of two keeps the file small
            if spec["dtype"] == "int64":
                x = torch.randint(0, spec["vocab_size"], shape, generator=gen)
            else:
                x = torch.randn(shape, generator=gen)
            with torch.no_grad():
                try:
                    y, again = model(x), model(x)
                except Exception as e:  # an error-case fixture: loading is what is checked
                    print(f"{name}: no reference ({str(e).splitlines()[0][:80]})")
                    continue
            y, again = (v if isinstance(v, torch.Tensor) else v[0] for v in (y, again))
            if not torch.equal(y, again):  # swin: torchvision 0.14 drops out in eval too
                print(f"{name}: no reference (its forward draws random numbers in eval mode)")
                continue
            key = os.path.relpath(path, OUT)
            entries[key + ":input"] = x
            entries[key + ":output"] = y
    version = torch.__version__.split("+")[0].split("a")[0]
    out = os.path.join(OUT, f"references_{version}.pt")
    torch.save(entries, out)
    print("wrote", len(entries) // 2, "references to", os.path.normpath(out))


class MaskedBert(nn.Module):
    """The BERT most people write: token and position embeddings, nn.TransformerEncoder
    called with a padding mask (src_key_padding_mask = attention_mask == 0), a classifier on
    the first token. Layer dropout 0.1, as BERT's."""

    def __init__(self, vocab=96, d=32, heads=4, layers=3, seq=16, classes=4):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        layer = nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(d, classes)

    def forward(self, input_ids, attention_mask):
        pos = torch.arange(input_ids.size(1), device=input_ids.device)
        x = self.tok(input_ids) + self.pos(pos)
        x = self.encoder(x, src_key_padding_mask=attention_mask == 0)
        return self.head(x[:, 0])


def write_masked_bert():
    """data/masked_bert.pt (scripted by torch 2.11, whose TransformerEncoder tests its fast
    paths at run time) and data/masked_bert_tokens.pt: 64 sequences of 4-16 ids padded with
    0, attention_mask 1 on the real ids, labels 0-3 (the first id's remainder mod 4, so that
    the classifier can learn it)."""
    out = os.path.join(OUT, "data")
    torch.manual_seed(0)
    torch.jit.save(torch.jit.script(MaskedBert()), os.path.join(out, "masked_bert.pt"))
    gen = torch.Generator().manual_seed(2)
    n, t = 64, 16
    input_ids = torch.zeros(n, t, dtype=torch.long)
    mask = torch.zeros(n, t, dtype=torch.long)
    for i in range(n):
        length = int(torch.randint(4, t + 1, (1,), generator=gen))
        input_ids[i, :length] = torch.randint(1, 96, (length,), generator=gen)
        mask[i, :length] = 1
    labels = input_ids[:, 0] % 4
    torch.save({"input_ids": input_ids, "attention_mask": mask, "labels": labels},
               os.path.join(out, "masked_bert_tokens.pt"))
    print("wrote masked_bert.pt and masked_bert_tokens.pt to", os.path.normpath(out))


def main():
    import sys
    if sys.argv[1:] == ["data"]:
        write_data_fixtures()
        return
    if sys.argv[1:] == ["masked_bert"]:
        write_masked_bert()
        return
    if sys.argv[1:] == ["references"]:
        write_references()
        return
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    inputs = {}

    hf = GPT2LMHeadModel(GPT2Config())
    torch.jit.save(torch.jit.script(hf), os.path.join(OUT, "hf_gpt2.pt"))
    inputs["hf_gpt2.pt"] = {"dtype": "int64", "shape": [4, 16], "vocab_size": 96}

    traced = TracedGPT()
    example = torch.randint(0, 64, (2, 16))
    torch.jit.save(torch.jit.trace(traced, example), os.path.join(OUT, "traced_gpt.pt"))
    inputs["traced_gpt.pt"] = {"dtype": "int64", "shape": [4, 16], "vocab_size": 64}

    unet = UNet1d()
    torch.jit.save(torch.jit.script(unet), os.path.join(OUT, "unet.pt"))
    inputs["unet.pt"] = {"dtype": "float32", "shape": [4, 4, 32]}

    torch.jit.save(torch.jit.script(DataDependent()), os.path.join(OUT, "data_dependent.pt"))
    inputs["data_dependent.pt"] = {"dtype": "float32", "shape": [4, 8]}
    torch.jit.save(torch.jit.script(TwoInputs()), os.path.join(OUT, "two_inputs.pt"))
    inputs["two_inputs.pt"] = {"dtype": "float32", "shape": [4, 8]}
    torch.jit.save(torch.jit.script(SqueezeBatch()), os.path.join(OUT, "squeeze_batch.pt"))
    inputs["squeeze_batch.pt"] = {"dtype": "float32", "shape": [4, 4, 8]}
    torch.jit.save(torch.jit.script(LstmDropout()), os.path.join(OUT, "lstm_dropout.pt"))
    inputs["lstm_dropout.pt"] = {"dtype": "int64", "shape": [4, 16], "vocab_size": 16}

    with open(os.path.join(OUT, "fixtures.json"), "w") as f:
        json.dump(inputs, f, indent=2, sort_keys=True)
        f.write("\n")
    print("wrote", ", ".join(sorted(inputs)), "to", os.path.normpath(OUT))
    write_loss_model()
    write_real_models()
    write_data_fixtures()
    write_masked_bert()


if __name__ == "__main__":
    main()
