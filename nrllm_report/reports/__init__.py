"""What the gate and the diff print and write: text, JSON, Markdown and JUnit reports, not pages of the site.

They stand above ``site`` because a report's Markdown and its run words reuse the site's page kit,
never the other way round.
"""
