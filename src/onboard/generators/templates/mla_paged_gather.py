def _latents(ckv, kpe, pages, last_page_len):
    # Every page but the last holds page_size tokens; the last holds last_page_len.
    def tokens(cache):
        full = cache[pages[:-1]].flatten(0, 1)
        return torch.cat([full, cache[pages[-1], :last_page_len]], dim=0)

    return tokens(ckv), tokens(kpe)
