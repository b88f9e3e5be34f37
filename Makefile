.PHONY: demo test fast setup

demo:  ## run Chorus with a demo campaign and a simulated crowd (SQLite, no services needed)
	bin/demo

test:  ## set up and run every test
	bin/test

fast:  ## the inner loop: every test but the browser and real-process ones, on SQLite (no lint, no PostgreSQL)
	bin/setup
	env -u DATABASE_URL .venv/bin/pytest -m "not browser and not services" -q

setup:
	bin/setup
