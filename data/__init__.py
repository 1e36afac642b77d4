"""The offline stand-in datasets, shipped with the library as `rankcollapse.standins` (see
README.md here and `rankcollapse.data`). Data only: nothing here needs importing."""
