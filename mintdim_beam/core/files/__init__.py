"""Storage and ownership: one I/O layer for local paths and fsspec URLs (`storage`), one
build per output directory (`ownership`), content checksums of what a build writes
(`checksums`) and the disk a local build needs (`disk_space`)."""
