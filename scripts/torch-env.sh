# The Python environment that holds ppstage's LibTorch (the torch wheel), torchvision and NumPy,
# shared by every clone on the machine. Sourced by scripts/install-deps.sh, which makes it, and
# scripts/python, which runs it; CMake finds it by the same default (cmake/ppstage_libtorch.cmake).
PPSTAGE_TORCH_VERSION=2.11.0
PPSTAGE_VENV=${PPSTAGE_VENV:-$HOME/.cache/ppstage/torch-$PPSTAGE_TORCH_VERSION}
