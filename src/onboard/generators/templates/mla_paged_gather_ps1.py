def _latents(ckv, kpe, pages, last_page_len):
    # page_size 1: pages are token slots.
    return ckv[pages, 0], kpe[pages, 0]
