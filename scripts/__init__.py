"""KernelRL's command-line programs: each module runs as `python scripts/NAME.py` or as the `kernelrl-*`
command pyproject.toml's [project.scripts] names for it."""
