"""Runnable pipeline entry points (what a Flex Template or a cluster submit runs)."""
