// Command hello is the baseline of the cold-start benchmark: the smallest
// Lambda function aws-lambda-go can make, answering a Function URL event
// with a fixed response.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	lambda.Start(func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		return events.LambdaFunctionURLResponse{StatusCode: 200, Headers: map[string]string{"Content-Type": "application/json"}, Body: `{"hello":"world"}`}, nil
	})
}
