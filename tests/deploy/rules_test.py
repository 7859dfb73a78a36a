"""Each deploy-time rule of tests/deploy/rules.py fails on a copy of
infra/template.yaml with that rule broken again, and the template itself
passes them all. Run by the test command:
`python -m unittest discover -s tests/deploy -p '*_test.py'`.
"""

import copy
import unittest

import rules
import template as tpl


class TemplateRules(unittest.TestCase):
    def setUp(self):
        self.t = tpl.load()

    def broken(self, change):
        t = copy.deepcopy(self.t)
        change(t["Resources"], t["Parameters"])
        return rules.breaches(t)

    def assert_breach(self, found, *words):
        self.assertTrue(
            any(all(w in b for w in words) for b in found),
            f"no breach naming {words} in {found}",
        )

    def test_the_template_keeps_every_rule(self):
        self.assertEqual(rules.breaches(self.t), [])

    def test_a_dead_letter_queue_that_does_not_list_a_queue_redriving_into_it_fails(self):
        def unlist(res, _):
            allow = res["DeadLetterQueue"]["Properties"]["RedriveAllowPolicy"]
            allow["sourceQueueArns"] = [
                a for a in allow["sourceQueueArns"] if "slow-deliveries" not in tpl.sub_text(a)
            ]

        self.assert_breach(self.broken(unlist), "DeadLetterQueue", "SlowDeliveryQueue")

    def test_a_dead_letter_queue_that_denies_all_fails(self):
        def deny(res, _):
            res["IngestDeadLetterQueue"]["Properties"]["RedriveAllowPolicy"] = {
                "redrivePermission": "denyAll"
            }

        self.assert_breach(self.broken(deny), "denyAll", "IngestQueue")

    def test_an_allow_list_naming_its_source_by_get_att_fails(self):
        def cycle(res, _):
            allow = res["DeadLetterQueue"]["Properties"]["RedriveAllowPolicy"]
            allow["sourceQueueArns"].append({"Fn::GetAtt": ["SlowDeliveryQueue", "Arn"]})

        self.assert_breach(self.broken(cycle), "SlowDeliveryQueue", "cycle")

    def test_an_allow_list_naming_another_account_fails(self):
        def pin(res, _):
            allow = res["IngestDeadLetterQueue"]["Properties"]["RedriveAllowPolicy"]
            allow["sourceQueueArns"] = [
                {"Fn::Sub": "arn:aws:sqs:eu-west-1:111111111111:${AWS::StackName}-ingest.fifo"}
            ]

        self.assert_breach(self.broken(pin), "IngestDeadLetterQueue", "IngestQueue")

    def test_a_reservation_of_zero_fails(self):
        def zero(res, _):
            res["FanoutFunction"]["Properties"]["ReservedConcurrentExecutions"] = 0

        self.assert_breach(self.broken(zero), "FanoutFunction", "never runs")

    def test_a_default_reservation_fails(self):
        def reserve(_, params):
            params["DeliveryReservedConcurrency"]["Default"] = 50

        self.assert_breach(self.broken(reserve), "DeliveryFunction", "reserves 50")

    def test_a_reservation_written_as_a_number_fails(self):
        def reserve(res, _):
            res["SlowDeliveryFunction"]["Properties"]["ReservedConcurrentExecutions"] = 10

        self.assert_breach(self.broken(reserve), "SlowDeliveryFunction", "reserves 10")

    def test_a_function_without_a_throttles_alarm_fails(self):
        def drop(res, _):
            del res["ApiThrottlesAlarm"]

        self.assert_breach(self.broken(drop), "ApiFunction", "Throttles")

    def test_a_function_without_an_errors_alarm_fails(self):
        def drop(res, _):
            del res["SlowDeliveryErrorsAlarm"]

        self.assert_breach(self.broken(drop), "SlowDeliveryFunction", "Errors")

    def test_a_visibility_under_six_function_timeouts_fails(self):
        def shorten(res, _):
            res["SlowDeliveryQueue"]["Properties"]["VisibilityTimeout"] = 900

        self.assert_breach(self.broken(shorten), "SlowDeliveryQueue", "900")

    def test_a_fifo_batch_over_ten_fails(self):
        def widen(res, _):
            res["FanoutFunction"]["Properties"]["Events"]["Ingest"]["Properties"]["BatchSize"] = 20

        self.assert_breach(self.broken(widen), "FanoutFunction", "20")

    def test_a_ttl_on_another_attribute_fails(self):
        def rename(res, _):
            res["Table"]["Properties"]["TimeToLiveSpecification"]["AttributeName"] = "ttl"

        self.assert_breach(self.broken(rename), "Table", "TTL", "expires_at")

    def test_a_function_whose_role_may_not_write_its_log_group_fails(self):
        def narrow(res, _):
            statements = res["DeliveryFunctionRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
            logs = next(s for s in statements if isinstance(s, dict) and s.get("Sid") == "Logs")
            logs["Resource"] = [r for r in logs["Resource"] if tpl.get_att_target(r, "Arn") != "SlowDeliveryLogGroup"]

        self.assert_breach(self.broken(narrow), "SlowDeliveryFunction", "SlowDeliveryLogGroup")

    def test_an_index_left_out_of_autoscaling_fails(self):
        def drop(res, _):
            del res["Gsi2ReadScalingPolicy"]

        self.assert_breach(self.broken(drop), "index/gsi2", "ReadCapacityUnits")


if __name__ == "__main__":
    unittest.main()
