"""The site's pages and summary.json against what the rows say, in both languages; links, catalogs, lists, timelines."""
