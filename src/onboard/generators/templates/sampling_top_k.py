def _top_k(row, k):
    # Keep the k most probable tokens and renormalize; k outside (0, vocab) keeps everything.
    if 0 < k < row.shape[0]:
        kept = torch.argsort(row, descending=True)[:k]
        filtered = torch.zeros_like(row)
        filtered[kept] = row[kept]
        row = filtered / filtered.sum()
    return row
