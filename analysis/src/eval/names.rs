//! The rows of an evaluation in words ([`row_words`]): the one place that maps the code names
//! of the JSON (`ar1_iterated`, `var_p`) to what a figure's legend and a table's key say.

/// Every code name of an evaluation's rows with its words, in the order of the table.
pub const ROW_WORDS: [(&str, &str); 12] = [
    ("model", "model"),
    ("zero", "zero (the training mean)"),
    ("last_token", "last token, repeated"),
    ("window_mean", "mean of the window"),
    ("ar1_iterated", "AR(1), iterated"),
    ("ar_p", "AR(p) per parcel"),
    ("var1", "ridge VAR(1)"),
    ("var_p", "ridge VAR(p)"),
    ("var_pca", "ridge VAR(p) of principal components"),
    ("single_lag_ar_reference", "single-lag AR reference (1 - acf^2)"),
    ("floor_empirical", "single-lag AR reference (1 - acf^2)"),
    ("floor_exact", "exact floor of the AR(1) process"),
];

/// The words of the row `name`; the name itself when it has none.
pub fn row_words(name: &str) -> &str {
    ROW_WORDS.iter().find(|(n, _)| *n == name).map_or(name, |(_, w)| w)
}

/// The key of a table whose rows carry code names: `ar1_iterated = AR(1), iterated; ...` for
/// the `names` that have words other than themselves.
pub fn key(names: &[&str]) -> String {
    let parts: Vec<String> =
        names.iter().filter(|n| row_words(n) != **n).map(|n| format!("{n} = {}", row_words(n))).collect();
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_has_words_and_unknown_names_stay() {
        assert_eq!(row_words("ar1_iterated"), "AR(1), iterated");
        assert_eq!(row_words("var_p"), "ridge VAR(p)");
        assert_eq!(row_words("something_new"), "something_new");
        assert_eq!(key(&["model", "var1", "zero"]), "var1 = ridge VAR(1); zero = zero (the training mean)");
    }
}
