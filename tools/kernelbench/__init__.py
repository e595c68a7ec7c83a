"""The PyTorch side of mblast, driven by tools/mblast_kernelbench.py: KernelBench-format files
as problems (importer), PyTorch baselines (baseline), candidates as KernelBench submissions
(export). See docs/kernelbench.md."""
