"""Commands of trust: calibrate and validate (registered on ``paigrid.cli.app``)."""
