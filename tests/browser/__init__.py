"""What a person sees in Debian's Chromium: pages, axe-core's rules, the run index's filter, printing."""
