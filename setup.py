from setuptools import find_packages, setup

setup(
    name="mintdim-beam",
    version="0.2.0",
    description="MintDim unit-build as an Apache Beam pipeline: JSONL -> exact tokens -> fixed-width unit shards",
    python_requires=">=3.10",
    packages=find_packages(include=["mintdim_beam", "mintdim_beam.*", "pipelines", "pipelines.*"]),
    # The native modules `make setup` built, where they were (an sdist or wheel made
    # from this tree carries them to workers, Beam's --setup_file included; one made
    # from a clean checkout has none, and its workers encode with `tokenizers` or
    # sentencepiece's Python API, the same ids, recorded in each manifest's
    # `engine.used`).
    package_data={"mintdim_beam.core.tokenizer": ["sp_ids*.so", "bpe_ids*.so"],
                  "mintdim_beam.train_tokenizer": ["bpe_train"]},
    install_requires=[
        "apache-beam>=2.60",
        "sentencepiece==0.2.1",  # the version mintdim 0.2.1 runs with: same ids on ties
        "tokenizers>=0.15",
        "tiktoken>=0.7",  # the fast exact engine for byte-level BPE, and tiktoken files
        "numpy",
        "fsspec",
        "gcsfs>=2024.6.0",  # gs:// paths need no extra install
        "matplotlib",  # `mintdim-beam report` figures
        "jinja2>=3.1.6",  # chat templates; older 3.1.x have sandbox escapes (templates are untrusted)
        "tqdm>=4.66",  # the live progress line of a local build
        "pyyaml>=5.1",  # YAML CONFIG files (`core/config/config_file.py`); was only Beam's
        "pyarrow>=14",  # Parquet inputs (apache-beam pulls it too: declared because we import it)
    ],
    extras_require={
        # Real protocol peers for the remote-path tests: a GCS emulator and moto's S3 server.
        # Lower bounds keep pip from backtracking to an s3fs without aiobotocore.
        "test": ["pytest>=7", "pytest-timeout", "pytest-xdist>=3.5", "s3fs>=2024.6.0", "zstandard",
                 "moto[server]>=5", "gcp-storage-emulator",
                 "transformers",  # chat-template exactness tests; needs no torch
                 "mistral-common==1.13.1",  # its own encode_chat_completion, its tokenizers
                 "h5py",  # reads back `export --format hdf5`
                 "pycountry==26.2.16",  # real multilingual text (163 locales) for the engine tests
                 "datasets"],  # reads `export --format parquet` (README, docs/export.md)
        "aws": ["s3fs>=2024.6.0"],
        "hdf5": ["h5py"],  # `mintdim-beam export --format hdf5`
        # Imported only when used: .jsonl.zst inputs (without it they are refused before
        # any output, saying what to install), and the `mintdim_beam.torch` dataset.
        "zstd": ["zstandard"],
        "torch": ["torch"],
    },
    entry_points={"console_scripts": ["mintdim-beam=mintdim_beam.cli:console_main"]},
)
