"""The shared core every capability builds on, with no Beam in it: config and its
validation (`config`, `config_file`), templates and rendering (`template`,
`render_batch`), tokenizers and batch encoding (`tokenizers`, `encode_batch`), the
driver's preparation of a dataset (`prepare`), the on-disk format (`format`), inputs
(`source`: byte ranges and lines; `compression`; `input_files`: identities), storage
through fsspec (`storage`), output ownership (`ownership`), and errors (`errors`,
`failures` for errors found in workers, `faults` for test-only fault injection).

Core imports nothing from `build` or `audit`."""
