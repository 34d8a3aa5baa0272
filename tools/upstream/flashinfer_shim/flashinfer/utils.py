"""The one helper of flashinfer.utils that flashinfer.testing relies on."""


def round_up(x: int, y: int) -> int:
    """The smallest multiple of y that is at least x."""
    return (x + y - 1) // y * y
