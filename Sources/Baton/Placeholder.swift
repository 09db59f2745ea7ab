public enum BatonPlaceholder {}
