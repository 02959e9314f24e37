"""Facts → findings: gather the facts about one environment and diagnose them."""
