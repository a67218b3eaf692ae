"""A2A: interlock agents served to A2A clients, and remote A2A agents as tools."""
