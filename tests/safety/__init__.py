"""Safe to publish: hostile input and ids, privacy, the pages' policy, the output folder, interrupts and signals."""
