//! The settings at hooklane's edges, read by [`Config::from_lookup`]:
//! what deliveries may reach (the egress policy) and how the portal is
//! reached (its signing key, public URL and who may frame it).

use super::{bad, parse_bool, Config, ConfigError};

impl Config {
    /// Reads the egress policy's flags.
    pub(super) fn read_egress(
        &mut self,
        get: &impl Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        for (var, slot) in [
            ("HOOKLANE_ALLOW_HTTP", &mut self.egress.allow_http),
            (
                "HOOKLANE_ALLOW_PRIVATE_TARGETS",
                &mut self.egress.allow_private,
            ),
            (
                "HOOKLANE_ALLOW_METADATA_TARGETS",
                &mut self.egress.allow_metadata,
            ),
        ] {
            if let Some(v) = get(var) {
                *slot = parse_bool(var, &v)?;
            }
        }
        Ok(())
    }

    /// Reads the portal's settings.
    pub(super) fn read_access(
        &mut self,
        get: &impl Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        if let Some(v) = get("HOOKLANE_PORTAL_KEY").filter(|v| !v.is_empty()) {
            if v.len() < 32 {
                return Err(bad("HOOKLANE_PORTAL_KEY", "use at least 32 bytes"));
            }
            self.portal_key = Some(v.into_bytes());
        }
        if let Some(v) = get("HOOKLANE_PUBLIC_URL").filter(|v| !v.is_empty()) {
            let url = url::Url::parse(v.trim())
                .ok()
                .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
                .filter(|u| u.query().is_none() && u.fragment().is_none())
                .ok_or_else(|| bad("HOOKLANE_PUBLIC_URL", "an http or https URL without query"))?;
            self.public_url = Some(url.as_str().trim_end_matches('/').to_owned());
        }
        if let Some(v) = get("HOOKLANE_PORTAL_FRAME_ANCESTORS").filter(|v| !v.trim().is_empty()) {
            let origin = |s: &str| {
                s == "'self'"
                    || url::Url::parse(s).is_ok_and(|u| {
                        matches!(u.scheme(), "http" | "https")
                            && u.host().is_some()
                            && u.path() == "/"
                            && !s.ends_with('/')
                    })
            };
            if !v.split_whitespace().all(origin) {
                let why = "space-separated origins (https://host[:port]) or 'self'";
                return Err(bad("HOOKLANE_PORTAL_FRAME_ANCESTORS", why));
            }
            self.portal_frame_ancestors = Some(v.split_whitespace().collect::<Vec<_>>().join(" "));
        }
        Ok(())
    }
}
