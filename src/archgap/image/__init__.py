"""Container images: where they come from (a registry, a layout, an archive) and what is in them."""
