"""A real MPI checkpointing application (mpi4py), its IOR-style I/O model, and the
deterministic checkpoint contents shared by the MPI test jobs and benchmarks."""
