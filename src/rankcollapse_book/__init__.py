"""The book tooling around the `rankcollapse` library: the pipeline that executes the chapters
and builds the HTML (`pipeline`), the chapter header and provenance (`chapter`), figure export
(`export`), the Figures page (`figures_page`) and the browser check of the built site
(`sitecheck`). The science package never imports this one."""
