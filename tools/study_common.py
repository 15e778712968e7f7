"""What every study tool (scaling_study, fidelity_study, task_study, mqar_study and their tables
and plots) shares, with no dependency of its own, so that none of them imports another only for
these: the error a study reports and the size-ladder number format."""


class StudyError(RuntimeError):
    """A sweep folder or table that cannot be used; the message names the file."""


def si(count):
    """40123456 -> '40.1M' (parameter counts as in the size ladder's names)."""
    for factor, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(count) >= factor:
            return f"{count / factor:.3g}{suffix}"
    return f"{count:g}"
