int config;
