#!/usr/bin/env bash
# Sets up everything a fresh Debian 12 machine lacks, builds ppstage and runs its main job.
# For now that is the splitter: the built-in GPT cut into 4 balanced pipeline stages, then a
# Hugging Face style GPT-2 saved with torch.jit.save cut at explicit split points.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
build=${PPSTAGE_BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DPPSTAGE_BUILD_TESTS=ON >/dev/null
cmake --build "$build" -j "${PPSTAGE_JOBS:-2}" --target ppstage

echo
echo "$ ppstage split --config configs/gpt-tiny.ini --pipeline.stages 4"
"$build/src/ppstage" split --config configs/gpt-tiny.ini --pipeline.stages 4
echo
hf=tests/fixtures/hf_gpt2.pt
echo "$ ppstage split --model.name $hf --model.vocab_size 96 --model.seq_len 16 \\"
echo "    --pipeline.split_points transformer.h.1,transformer.h.2"
"$build/src/ppstage" split --model.name "$hf" --model.vocab_size 96 --model.seq_len 16 \
  --pipeline.split_points transformer.h.1,transformer.h.2
