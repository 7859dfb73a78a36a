"""The deploy check's environment rule (tests/deploy/environment.py) fails
on a template whose function environments miss a variable the code reads
(here, one renamed), and on one that sets a variable no code reads; the
template as it is passes. Run by the test command with the other
`*_test.py` of this folder.
"""

import unittest

import environment
import template as tpl


def environments(t):
    return {name: set(p["Environment"]["Variables"]) for name, p in tpl.functions(t)}


class Environments(unittest.TestCase):
    def setUp(self):
        self.t = tpl.load()
        self.read = environment.read_by_code()

    def test_the_template_sets_every_variable_the_code_reads(self):
        self.assertEqual(environment.breaches(self.read, environments(self.t)), [])

    def test_a_renamed_variable_fails_both_ways(self):
        variables = self.t["Globals"]["Function"]["Environment"]["Variables"]
        variables["HOOKLANE_SLOW_AFTR"] = variables.pop("HOOKLANE_SLOW_AFTER")
        found = environment.breaches(self.read, environments(self.t))
        self.assertIn("HOOKLANE_SLOW_AFTER is read by the code and set on no function", found)
        self.assertIn("HOOKLANE_SLOW_AFTR is set on a function and read by no code", found)

    def test_a_variable_set_only_on_the_slow_pool_counts_as_set(self):
        envs = environments(self.t)
        self.assertIn("HOOKLANE_POOL", envs["SlowDeliveryFunction"])
        self.assertNotIn("HOOKLANE_POOL", envs["DeliveryFunction"])
        self.assertEqual(environment.breaches(self.read, envs), [])

    def test_a_variable_moved_onto_one_function_alone_fails_for_the_others(self):
        variables = self.t["Globals"]["Function"]["Environment"]["Variables"]
        value = variables.pop("HOOKLANE_SLOW_AFTER")
        api = self.t["Resources"]["ApiFunction"]["Properties"]
        api.setdefault("Environment", {"Variables": {}})["Variables"]["HOOKLANE_SLOW_AFTER"] = value
        found = environment.breaches(self.read, environments(self.t))
        self.assertIn("HOOKLANE_SLOW_AFTER is set on some functions but not on DeliveryFunction", found)

    def test_a_variable_read_since_it_was_left_out_on_purpose_must_say_so(self):
        found = environment.breaches(self.read | {"HOOKLANE_NEW_KNOB"}, environments(self.t))
        self.assertEqual(found, ["HOOKLANE_NEW_KNOB is read by the code and set on no function"])


if __name__ == "__main__":
    unittest.main()
