//! Runs each scenario on both backends: `on_both_backends!(a, b)` makes
//! `embedded::a`, `aws::a`, … from `async fn a(backend: Backend)`.

/// Generates one test per backend for each named scenario.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod embedded {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::Backend::Embedded).await
                }
            )*
        }
        mod aws {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::Backend::Aws).await
                }
            )*
        }
    };
}
