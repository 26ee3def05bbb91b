"""Client workloads and operation generators."""
