"""Commands of the PAI study: population, trace import, report (registered on ``paigrid.cli.app``)."""
