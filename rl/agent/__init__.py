"""The kernel agent: an evolutionary search for fast, correct Triton kernels over the evaluation pool.

records.py   CandidateRecord, Proposal: what the modules exchange
store.py     PopulationStore: per-problem populations in SQLite (resumable), migrations
features.py  MAP-Elites cells from simple kernel features; fitness from reward and speedup
archive.py   islands of MAP-Elites archives, parent selection, ring migration
operators.py prompts of the LLM operators: fresh (strategies), mutate, crossover, retrieval
tuner.py     the non-LLM operator: launch-configuration variants by AST rewriting of constants
policies.py  Policy (an engine or a replayed files directory), PolicyBandit (UCB1 over policies)
budget.py    caps per problem and overall, usage from the store
search.py    Search: parallel proposers per problem, the loop
verify.py    re-verification of the winners (the winner's curse)
report.py, plots.py, outputs.py   agent.json / agent.md, PNGs, best files, solution store
main.py      run_from_config (conf/generate.yaml), used by scripts/generate.py
"""
