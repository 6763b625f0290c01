"""The crawler: nn.Module classes of Python source trees and installed packages turned into KernelBench-format
problems. `extract` pulls a class out of its file with the code it needs (AST), `shapes` writes inputs for it
by rules on its signature, `llm_inputs` asks an OpenAI-compatible endpoint instead, and `crawler` walks
packages and directories and records package, version, file and license for each problem."""
