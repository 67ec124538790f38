"""Configuration: a unit-build's config validated and resolved into datasets
(`unit_config`), a pack-build's (`pack_config`), the kinds of source (`sources`), CONFIG
files (`config_file`), and the driver's preparation of each dataset before any output
(`prepare`: tokenizer facts, compiled template, token dtype, template checks)."""
