def _top_p(row, p):
    # Keep the smallest prefix (by probability) whose mass reaches p - the token that crosses p
    # is kept - and renormalize; p >= 1 keeps everything.
    if p < 1.0:
        values, order = torch.sort(row, descending=True)
        # mass strictly before each token
        before = torch.cat([values.new_zeros(1), torch.cumsum(values, dim=0)[:-1]])
        kept = order[before <= p]
        kept = kept if kept.numel() > 0 else order[:1]
        filtered = torch.zeros_like(row)
        filtered[kept] = row[kept]
        row = filtered / filtered.sum()
    return row
