"""The training-data curation pipeline (scripts/curate.py; docs/curation.md): sources (`crawl/`, `synthetic`,
KernelBench-format directories) and one module per stage: `validate` (normalize, run), `decontam`, `dedup`,
`difficulty`, `variants`, `runtime`, `cluster`; `pipeline` wires them, `output` writes the set and its
manifest, `problem_set` reads it back. Similarity helpers: `textsim` (tokens, Jaccard, MinHash LSH),
`embed` and `ops` (offline embedders), `calibration` (known duplicates). Importing this package loads nothing."""
