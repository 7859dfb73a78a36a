//! Creates the table and queues hooklane needs, with the attributes of
//! DESIGN §3 (FIFO, high-throughput mode, explicit maximum message size,
//! redrive to the FIFO dead-letter queue as a backstop). Used by
//! `serve --backend aws --create-resources` against a local AWS-compatible
//! server; production stacks come from `infra/template.yaml`.

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
        let ddb = aws_sdk_dynamodb::Client::new(sdk);
        let exists = ddb.describe_table().table_name(&table).send().await.is_ok();
        if !exists {
            let mut req = ddb
                .create_table()
                .table_name(&table)
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
                .table_name(&table)
                .time_to_live_specification(
                    TimeToLiveSpecification::builder()
                        .enabled(true)
                        .attribute_name("expires_at")
                        .build()?,
                )
                .send()
                .await?;
        }
        let sqs = aws_sdk_sqs::Client::new(sdk);
        let dlq_url = self.queue(&sqs, "dead-letters", None).await?;
        let dlq_arn = arn_of(&sqs, &dlq_url).await?;
        let ingest_dlq_url = self.queue(&sqs, "ingest-dead-letters", None).await?;
        let ingest_dlq_arn = arn_of(&sqs, &ingest_dlq_url).await?;
        let ingest_url = self
            .queue(&sqs, "ingest", Some((ingest_dlq_arn, 10)))
            .await?;
        let delivery_url = self
            .queue(&sqs, "deliveries", Some((dlq_arn.clone(), 1000)))
            .await?;
        let slow_url = self
            .queue(&sqs, "slow-deliveries", Some((dlq_arn, 1000)))
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

    async fn queue(
        &self,
        sqs: &aws_sdk_sqs::Client,
        name: &str,
        redrive: Option<(String, u32)>,
    ) -> anyhow::Result<String> {
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
            (
                QueueAttributeName::VisibilityTimeout,
                self.visibility.as_secs().max(1).to_string(),
            ),
        ]
        .into_iter()
        .collect();
        if let Some((arn, max)) = redrive {
            attrs.insert(
                QueueAttributeName::RedrivePolicy,
                serde_json::json!({"deadLetterTargetArn": arn, "maxReceiveCount": max}).to_string(),
            );
        }
        let resp = sqs
            .create_queue()
            .queue_name(format!("{}-{name}.fifo", self.prefix))
            .set_attributes(Some(attrs))
            .send()
            .await?;
        resp.queue_url
            .ok_or_else(|| anyhow::anyhow!("CreateQueue returned no URL for {name}"))
    }
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
