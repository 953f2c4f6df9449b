"""Server-rendered pages: views, forms and their URLs."""
