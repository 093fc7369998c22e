"""Tools that run around a training job rather than inside it.

- `launch`: ``minigluon-launch`` starts a scheduler, servers and workers (local, ssh, mpi,
  slurm) and owns every process it starts (see docs/launch.md).
- `mpi_role`: turns an MPI or Slurm rank into a DMLC role inside ``mpirun``/``srun``.
- `guard`: the supervisor each launched process runs under, so none outlives the launcher.
- `stats`: the workers' step-time files and the end-of-job table made from them.
- `dashboard`: the job's live page (``minigluon-launch --dashboard``, docs/dashboard.md).
- `doctor`: ``python -m minigluon.tools.doctor`` checks hosts, ports, addresses, versions and
  clocks before a job, running `probe` on each host.
"""
from ..base import MXNetError


class LaunchError(MXNetError):
    """A job that cannot be started as asked; the message says what to change."""
