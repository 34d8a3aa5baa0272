def _min_p(row, p):
    # Keep the tokens at least p times as probable as the most probable one, and renormalize.
    filtered = torch.where(row >= p * row.max(), row, torch.zeros_like(row))
    return filtered / filtered.sum()
