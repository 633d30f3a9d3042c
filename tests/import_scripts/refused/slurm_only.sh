#!/bin/bash
# Submits to Slurm and nothing else: the training command runs inside the batch job.
CMD="python -u /opt/Megatron-LM/pretrain_gpt.py --num-layers 4 --hidden-size 512"
sbatch --nodes 2 --wrap "srun ${CMD}"
