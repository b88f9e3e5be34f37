.PHONY: demo test setup

demo:  ## run Chorus with a demo campaign and a simulated crowd (SQLite, no services needed)
	bin/demo

test:  ## set up and run every test
	bin/test

setup:
	bin/setup
