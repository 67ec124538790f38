"""export: a finished build written for another trainer's reader (Parquet for Hugging
Face and TRL, HDF5 in DataPipeline's layout, MosaicML's MDS) by a Beam pipeline, one
task per range of the build (`launch.run_export`; docs/export.md)."""
