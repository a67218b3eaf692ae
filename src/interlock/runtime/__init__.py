"""The runtime: the superstep engine, interrupts, resume and checkpoints."""
