"""Slurm as one of paika's executors (executor.py, one per pool; the contract in
scheduler/executors.py): its commands (sbatch, squeue, sinfo, scancel, sacct) run with
argument lists and timeouts, their JSON read into small models, their errors given codes.

paika decides where and when a job runs; Slurm starts, isolates and accounts for it.
"""
