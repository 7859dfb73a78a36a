//! Creates the table and queues hooklane needs, as `infra/template.yaml`
//! declares them (FIFO, high-throughput mode, explicit maximum message
//! size, 14 days' retention, SQS-managed encryption, redrive to the FIFO
//! dead-letter queues as a backstop, and each dead-letter queue's allow-list
//! naming the queues that redrive into it). Used by `serve --backend aws
//! --create-resources` against a local AWS-compatible server; production
//! stacks come from the template, and tests compare the two
//! (`tests/tests/deployed_stack.rs`: queue by queue and the table against
//! a stack on moto, the allow-lists and encryption on the fast pair, which
//! keeps them). Only the visibility timeout differs:
//! here it is the caller's (six attempt timeouts for `serve`), in the
//! template six function timeouts.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, TimeToLiveSpecification,
};
use aws_sdk_sqs::types::QueueAttributeName;

use crate::Settings;

/// Resource names derived from one prefix.
#[derive(Debug, Clone)]
pub struct Resources {
    /// Prefix of every name (`hooklane` gives `hooklane-deliveries.fifo`).
    pub prefix: String,
    /// Visibility timeout of the delivery queue (at least 6 × the
    /// function's timeout on AWS).
    pub visibility: Duration,
}

fn key(name: &str, kind: KeyType) -> anyhow::Result<KeySchemaElement> {
    Ok(KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(kind)
        .build()?)
}

fn string_attr(name: &str) -> anyhow::Result<AttributeDefinition> {
    Ok(AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(ScalarAttributeType::S)
        .build()?)
}

fn gsi(name: &str) -> anyhow::Result<GlobalSecondaryIndex> {
    Ok(GlobalSecondaryIndex::builder()
        .index_name(name)
        .key_schema(key(&format!("{name}pk"), KeyType::Hash)?)
        .key_schema(key(&format!("{name}sk"), KeyType::Range)?)
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::All)
                .build(),
        )
        .build()?)
}

impl Resources {
    /// Creates (or finds) every resource; returns their names.
    pub async fn create(&self, sdk: &aws_config::SdkConfig) -> anyhow::Result<Settings> {
        let table = format!("{}-table", self.prefix);
        create_table(&aws_sdk_dynamodb::Client::new(sdk), &table).await?;
        let sqs = aws_sdk_sqs::Client::new(sdk);
        let dlq_url = self
            .queue(
                &sqs,
                "dead-letters",
                Queue::DeadLetters(&["deliveries", "slow-deliveries"]),
            )
            .await?;
        let dlq_arn = arn_of(&sqs, &dlq_url).await?;
        let ingest_dlq_url = self
            .queue(&sqs, "ingest-dead-letters", Queue::DeadLetters(&["ingest"]))
            .await?;
        let ingest_dlq_arn = arn_of(&sqs, &ingest_dlq_url).await?;
        let ingest_url = self
            .queue(&sqs, "ingest", Queue::RedrivesTo(&ingest_dlq_arn, 10))
            .await?;
        let delivery_url = self
            .queue(&sqs, "deliveries", Queue::RedrivesTo(&dlq_arn, 1000))
            .await?;
        let slow_url = self
            .queue(&sqs, "slow-deliveries", Queue::RedrivesTo(&dlq_arn, 1000))
            .await?;
        Ok(Settings {
            table,
            ingest_queue_url: ingest_url,
            delivery_queue_url: delivery_url,
            dlq_url,
            ingest_dlq_url: Some(ingest_dlq_url),
            slow_queue_url: Some(slow_url),
            // The settings beside the names are the caller's to set
            // (`AwsEnv::onto`); the API fans out, as by default.
            fan_out_in_api: true,
            // One process on resources it created or found: `serve
            // --backend aws` runs no older version beside it. (A table an
            // older version used is indexed on its wide tenants' next
            // fan-out, whose read sees every subscription.)
            type_index_settle: std::time::Duration::ZERO,
            ..Settings::default()
        })
    }

    /// The ARN of this prefix's queue `name`, in the account and region of
    /// `beside` (the ARN of a queue created already).
    fn arn_beside(&self, beside: &str, name: &str) -> String {
        let head = beside.rsplit_once(':').map_or(beside, |(head, _)| head);
        format!("{head}:{}-{name}.fifo", self.prefix)
    }

    /// The attributes of every queue, as the template gives them.
    fn attributes(&self, kind: Queue<'_>) -> HashMap<QueueAttributeName, String> {
        let mut attrs: HashMap<QueueAttributeName, String> = [
            (QueueAttributeName::FifoQueue, "true".to_owned()),
            (
                QueueAttributeName::ContentBasedDeduplication,
                "false".to_owned(),
            ),
            (
                QueueAttributeName::DeduplicationScope,
                "messageGroup".to_owned(),
            ),
            (
                QueueAttributeName::FifoThroughputLimit,
                "perMessageGroupId".to_owned(),
            ),
            (QueueAttributeName::MaximumMessageSize, "262144".to_owned()),
            (
                QueueAttributeName::MessageRetentionPeriod,
                "1209600".to_owned(),
            ),
            (QueueAttributeName::SqsManagedSseEnabled, "true".to_owned()),
            (
                QueueAttributeName::VisibilityTimeout,
                self.visibility.as_secs().max(1).to_string(),
            ),
        ]
        .into_iter()
        .collect();
        if let Queue::RedrivesTo(arn, max) = kind {
            attrs.insert(
                QueueAttributeName::RedrivePolicy,
                serde_json::json!({"deadLetterTargetArn": arn, "maxReceiveCount": max}).to_string(),
            );
        }
        attrs
    }

    async fn queue(
        &self,
        sqs: &aws_sdk_sqs::Client,
        name: &str,
        kind: Queue<'_>,
    ) -> anyhow::Result<String> {
        let resp = sqs
            .create_queue()
            .queue_name(format!("{}-{name}.fifo", self.prefix))
            .set_attributes(Some(self.attributes(kind)))
            .send()
            .await?;
        let url = resp
            .queue_url
            .ok_or_else(|| anyhow::anyhow!("CreateQueue returned no URL for {name}"))?;
        if let Queue::DeadLetters(sources) = kind {
            // The sources' ARNs are known only once a queue of the account
            // exists: the allow-list is set after the create.
            let own = arn_of(sqs, &url).await?;
            let arns: Vec<String> = sources.iter().map(|s| self.arn_beside(&own, s)).collect();
            sqs.set_queue_attributes()
                .queue_url(&url)
                .attributes(
                    QueueAttributeName::RedriveAllowPolicy,
                    serde_json::json!({"redrivePermission": "byQueue", "sourceQueueArns": arns})
                        .to_string(),
                )
                .send()
                .await?;
        }
        Ok(url)
    }
}

/// What a queue is to the others.
#[derive(Clone, Copy)]
enum Queue<'a> {
    /// A dead-letter queue that takes only these queues (names under the
    /// prefix).
    DeadLetters(&'a [&'a str]),
    /// A queue redriving into this dead-letter queue after this many
    /// receives.
    RedrivesTo(&'a str, u32),
}

/// Creates the single table (keys, both indexes, on demand, TTL on
/// `expires_at`) unless it exists.
async fn create_table(ddb: &aws_sdk_dynamodb::Client, table: &str) -> anyhow::Result<()> {
    if ddb.describe_table().table_name(table).send().await.is_ok() {
        return Ok(());
    }
    let mut req = ddb
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key("pk", KeyType::Hash)?)
        .key_schema(key("sk", KeyType::Range)?)
        .global_secondary_indexes(gsi("gsi1")?)
        .global_secondary_indexes(gsi("gsi2")?);
    for a in ["pk", "sk", "gsi1pk", "gsi1sk", "gsi2pk", "gsi2sk"] {
        req = req.attribute_definitions(string_attr(a)?);
    }
    req.send().await?;
    ddb.update_time_to_live()
        .table_name(table)
        .time_to_live_specification(
            TimeToLiveSpecification::builder()
                .enabled(true)
                .attribute_name("expires_at")
                .build()?,
        )
        .send()
        .await?;
    Ok(())
}

async fn arn_of(sqs: &aws_sdk_sqs::Client, url: &str) -> anyhow::Result<String> {
    let resp = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await?;
    resp.attributes
        .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
        .ok_or_else(|| anyhow::anyhow!("no ARN for {url}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_letter_queues_allow_list_names_its_sources_beside_it() {
        let r = Resources {
            prefix: "hl".into(),
            visibility: Duration::from_secs(90),
        };
        let own = "arn:aws:sqs:eu-west-1:123456789012:hl-dead-letters.fifo";
        assert_eq!(
            r.arn_beside(own, "slow-deliveries"),
            "arn:aws:sqs:eu-west-1:123456789012:hl-slow-deliveries.fifo"
        );
    }
}
