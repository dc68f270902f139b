"""The test suite, a package so that test modules are named by their folder (``tests.xid.test_steps``): two files
with one basename in different folders (``tests/mig/test_plan.py``, ``tests/cost/test_plan.py``) do not collide."""
