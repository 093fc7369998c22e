"""The one summary the launcher prints at the end of a job: the workers' step times, when
they reported any, and what failed or had to be stopped, when anything did."""

PROG = "minigluon-launch"


def render(outcome, step_times=()):
    """Text for `outcome` (a procgroup.Outcome) after the `step_times` lines (see
    stats.step_time_lines), or '' when there is nothing to say."""
    lines = list(step_times)
    done = len(lines)
    failure = outcome.failure
    if failure is not None:
        lines.append(f"{failure.label} failed first (host {failure.host}): {failure.how}")
        if failure.tail:
            lines.append(f"last {len(failure.tail)} lines of {failure.label}:")
            lines += ["    " + line for line in failure.tail]
        else:
            lines.append(f"{failure.label} printed nothing")
        if failure.help:
            lines.append(failure.help)
    elif outcome.interrupted:
        lines.append(f"received {outcome.interrupted}")
    if outcome.lingering:
        lines.append(f"all workers finished, but {_names(outcome.lingering)} did not exit "
                     "on their own; stopped them")
    elif outcome.stopped:
        lines.append(f"stopped {_names(outcome.stopped)}")
    if len(lines) > done and outcome.exit_code:
        lines[-1] += f"; exiting with code {outcome.exit_code}"
    return "".join(f"{PROG}: {line}\n" for line in lines)


def _names(labels):
    return ", ".join(labels)
